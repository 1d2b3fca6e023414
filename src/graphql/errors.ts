import { ConflictError, GatewayError, NotFoundError, ValidationError, errorCatalogue, type ErrorCode, type FieldProblem } from "../errors.ts";
import { builder } from "./builder.ts";

/** Business failures are typed results carrying the catalogue's code; anything else is masked by yoga. */
export const ErrorCodeEnum = builder.enumType("ErrorCode", {
  values: Object.keys(errorCatalogue) as ErrorCode[],
});

export const ErrorInterface = builder.interfaceRef<GatewayError>("Error").implement({
  description: "A business failure: the operation did not happen. `code` is stable and machine-readable.",
  fields: (t) => ({
    message: t.exposeString("message"),
    code: t.field({ type: ErrorCodeEnum, resolve: (e) => e.code }),
  }),
});

builder.objectType(GatewayError, {
  name: "GatewayError",
  description: "A failure without extra fields, e.g. an inactive channel or a provider error.",
  interfaces: [ErrorInterface],
  isTypeOf: (value) => value instanceof GatewayError && !(value instanceof ValidationError || value instanceof NotFoundError || value instanceof ConflictError),
});

const FieldProblemType = builder.objectRef<FieldProblem>("FieldError").implement({
  description: "One bad field of an input.",
  fields: (t) => ({
    field: t.exposeString("field", { description: "As the input names it (a nested place: metadata.note, lines[0].amount)." }),
    message: t.exposeString("message", { description: "What is wrong with it, without the field's name." }),
  }),
});

builder.objectType(ValidationError, {
  name: "ValidationError",
  interfaces: [ErrorInterface],
  isTypeOf: (value) => value instanceof ValidationError,
  fields: (t) => ({
    field: t.string({ nullable: true, description: "The first bad field (the one `message` names).", resolve: (e) => e.field ?? null }),
    errors: t.field({ type: [FieldProblemType], description: "Every bad field found, the first one first.", resolve: (e) => e.errors }),
  }),
});

builder.objectType(NotFoundError, {
  name: "NotFoundError",
  interfaces: [ErrorInterface],
  isTypeOf: (value) => value instanceof NotFoundError,
});

builder.objectType(ConflictError, {
  name: "ConflictError",
  interfaces: [ErrorInterface],
  isTypeOf: (value) => value instanceof ConflictError,
  fields: (t) => ({ field: t.string({ nullable: true, resolve: (e) => e.field ?? null }) }),
});

/** The error types every fallible field declares. */
export const businessErrors = [GatewayError, ValidationError, NotFoundError, ConflictError];
