import { EnvelopArmorPlugin } from "@escape.tech/graphql-armor";
import { GraphQLError, NoSchemaIntrospectionCustomRule, type ValidationContext } from "graphql";
import type { Plugin } from "graphql-yoga";
import type { Config } from "../config.ts";

/**
 * Limits on what one GraphQL document may ask for, checked while parsing and validating, so a refused
 * document is an ordinary GraphQL error (HTTP 200, or 400 for application/graphql-response+json) and
 * never reaches a resolver. Limits are configurable (GRAPHQL_MAX_*); introspection and field suggestions
 * ("Did you mean ...?") both reveal the schema and follow GRAPHQL_INTROSPECTION (off in production).
 */
export function graphqlHardening(options: Config["graphql"]): Plugin[] {
  // Report like graphql-js's own validation rules (all problems, code GRAPHQL_VALIDATION_FAILED, 400 under
  // the newer media type) instead of armor's default of throwing a "Syntax Error".
  const asValidationError = { propagateOnRejection: false, onReject: [reportValidationError] };
  const plugins: Plugin[] = [
    EnvelopArmorPlugin({
      // Every fallible field returns a union here, so inline fragments are everywhere: count fields only.
      maxDepth: { n: options.maxDepth, flattenFragments: true, ...asValidationError },
      costLimit: { maxCost: options.maxCost, flattenFragments: true, ...asValidationError },
      maxAliases: { n: options.maxAliases, ...asValidationError },
      maxDirectives: { n: options.maxDirectives, ...asValidationError },
      // Counted while parsing, before a large document is even built.
      maxTokens: { n: options.maxTokens },
      blockFieldSuggestion: { enabled: !options.introspection },
    }) as Plugin,
  ];
  if (!options.introspection) plugins.push(disableIntrospection());
  plugins.push(scrubEchoedValues());
  return plugins;
}

function reportValidationError(context: ValidationContext | null, error: GraphQLError): void {
  context?.reportError(
    new GraphQLError(error.message.replace(/^Syntax Error: /, ""), { extensions: { code: "GRAPHQL_VALIDATION_FAILED" } }),
  );
}

/** graphql-js's own rule: any __schema or __type field is a validation error. */
function disableIntrospection(): Plugin {
  return {
    onValidate({ addValidationRule }) {
      addValidationRule(NoSchemaIntrospectionCustomRule);
    },
  };
}

/**
 * graphql-js names a variable it cannot coerce by echoing its value ("got invalid value { ... config:
 * { secret_key: ... } }"), and its reasons often echo it again. Secrets travel in variables, so the
 * message keeps the variable, the path and value-free reasons only.
 */
export function withoutEchoedValues(message: string): string {
  const match = /^Variable "(\$[^"]+)" got invalid value [\s\S]*?(?: at "([^"]+)")?; ([\s\S]*)$/.exec(message);
  if (!match) return message;
  const [, variable, path, reason = ""] = match;
  const valueFree = /^(Field "[^"]+" of required type "[^"]+" was not provided\.|Field "[^"]+" is not defined by type "[^"]+"\.|Expected type "[^"]+" to be an object\.)/.exec(reason);
  return `Variable "${variable}" got an invalid value${path ? ` at "${path}"` : ""}${valueFree ? `; ${valueFree[1]}` : ""}`;
}

/** Applies withoutEchoedValues to every error a GraphQL request returns over HTTP, SSE or WebSocket. */
export function scrubEchoedValues(): Plugin {
  return {
    onExecute() {
      return {
        onExecuteDone({ result, setResult }) {
          if (!("errors" in result) || !result.errors?.length) return;
          if (!result.errors.some((e) => withoutEchoedValues(e.message) !== e.message)) return;
          setResult({
            ...result,
            errors: result.errors.map((e) => {
              const message = withoutEchoedValues(e.message);
              return message === e.message ? e : new GraphQLError(message, { nodes: e.nodes, path: e.path, extensions: e.extensions });
            }),
          });
        },
      };
    },
  };
}
