import { graphql } from "../gql/index.ts";

/**
 * GraphQL documents and fragments that more than one test file uses, typed by codegen like every graphql() call in
 * test/ (`npm run codegen`). A file keeps the documents only it uses; one moves here when a second file needs it.
 * A fragment is spread by name (`...Failure`) in any file's document: codegen adds its definition to that document.
 */

/** A typed error result: its code and message. */
graphql(`
  fragment Failure on Error {
    code
    message
  }
`);

/** The same, with the input field a ValidationError names. */
graphql(`
  fragment FieldFailure on Error {
    code
    message
    ... on ValidationError {
      field
    }
  }
`);

/** Where a channel stands among the merchant's channels. */
graphql(`
  fragment ChannelStanding on PaymentChannel {
    databaseId
    isActive
    isDefault
  }
`);

/** A customer's own fields: in the customers' list, createCustomer's answer, a transaction's customer. */
graphql(`
  fragment CustomerContact on Customer {
    databaseId
    email
    firstName
    lastName
    phone
  }
`);

export const SetDefaultChannel = graphql(`
  mutation SetDefaultChannel($id: Int!) {
    setDefaultPaymentChannel(id: $id) { __typename ...ChannelStanding ...Failure }
  }
`);

export const DeactivateChannel = graphql(`
  mutation DeactivateChannel($id: Int!) {
    deactivatePaymentChannel(id: $id) { __typename ...ChannelStanding ...Failure }
  }
`);

/** The typed ValidationError a mutation or query answers when it refuses input `field`: "field: problem". */
export function validationError(field: string, problem: string) {
  return { __typename: "ValidationError", code: "validation_failed", message: `${field}: ${problem}`, field };
}
