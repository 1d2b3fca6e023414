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
