import { EnvelopArmorPlugin } from "@escape.tech/graphql-armor";
import { BREAK, GraphQLError, Kind, NoSchemaIntrospectionCustomRule, visit, type ASTNode, type DocumentNode, type ExecutionArgs, type ValidationContext } from "graphql";
import type { Plugin } from "graphql-yoga";
import type { Config } from "../config.ts";
import type { ValidationError } from "../errors.ts";
import { unsafeTextIn } from "../validation.ts";

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
  plugins.push(scrubEchoedValues(), refuseUnsafeText(), nameLoneSurrogateLiterals());
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

/** The first string literal in a document that unsafeTextIn refuses, named by its argument or input field. */
function unsafeLiteral(document: DocumentNode): ValidationError | null {
  let found: ValidationError | null = null;
  visit(document, {
    StringValue(node, _key, parent, _path, ancestors) {
      const owner = [...ancestors, parent].reverse().find(
        (a): a is ASTNode & { name: { value: string } } => !Array.isArray(a) && ((a as ASTNode).kind === Kind.ARGUMENT || (a as ASTNode).kind === Kind.OBJECT_FIELD),
      );
      found = unsafeTextIn(node.value, owner?.name.value ?? "query");
      return found ? BREAK : undefined;
    },
  });
  return found;
}

/**
 * Text with control characters (NUL above all: PostgreSQL cannot store it) or of absurd length, in a
 * variable or a literal, is refused before execution with code validation_failed naming where it is,
 * over HTTP, SSE and WebSocket alike (validation.ts has the rule; REST applies it to its raw input).
 */
export function refuseUnsafeText(): Plugin {
  const refusal = (args: ExecutionArgs) => {
    const unsafe = unsafeTextIn(args.variableValues ?? {}, "") ?? unsafeLiteral(args.document);
    return unsafe ? { errors: [new GraphQLError(unsafe.message, { extensions: { code: unsafe.code } })] } : null;
  };
  return {
    onExecute({ args, setResultAndStopExecution }) {
      const result = refusal(args);
      if (result) setResultAndStopExecution(result);
    },
    onSubscribe({ args, setResultAndStopExecution }) {
      const result = refusal(args);
      if (result) setResultAndStopExecution(result);
    },
  };
}

/** A lone surrogate written in a string literal, as graphql-js's lexer reports it (an escape, or the raw code unit). */
const LONE_SURROGATE_SYNTAX_ERROR = /^Syntax Error: (Invalid Unicode escape sequence: "\\u(\{0*)?[dD][89a-fA-F][0-9a-fA-F]{2}|Invalid character within String: U\+D[89A-F])/;

/**
 * graphql-js refuses a lone surrogate in a string literal while lexing, as a syntax error naming only a
 * position; refuseUnsafeText never sees the literal. This names the argument or input field the literal
 * belongs to, with the same code and words as a lone surrogate in a variable.
 */
function nameLoneSurrogateLiterals(): Plugin {
  return {
    onParse() {
      return ({ result, replaceParseResult }) => {
        if (!(result instanceof GraphQLError) || !LONE_SURROGATE_SYNTAX_ERROR.test(result.message)) return;
        const body = result.source?.body ?? "";
        const at = result.positions?.[0] ?? body.length;
        // The name before the open string literal the error is in: `reference: "...<here>`.
        const owner = /([_A-Za-z][_0-9A-Za-z]*)\s*:\s*"(?:[^"\\]|\\.)*$/.exec(body.slice(0, at))?.[1] ?? "query";
        const refusal = unsafeTextIn("\ud800", owner)!;
        replaceParseResult(new GraphQLError(refusal.message, { extensions: { code: refusal.code } }));
      };
    },
  };
}
