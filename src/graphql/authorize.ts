import { Kind, type DocumentNode, type FragmentDefinitionNode, type GraphQLObjectType, type GraphQLSchema, type OperationDefinitionNode, type SelectionSetNode } from "graphql";
import type { Principal } from "../auth.ts";
import { scopesOf } from "./builder.ts";

type Scopes = ReturnType<typeof scopesOf>;
type ScopeMap = { [scope: string]: unknown; $any?: ScopeMap; $all?: ScopeMap };

/**
 * Decides before execution whether a caller passes the scope-auth checks of every root field an operation
 * selects, from the same authScopes Pothos enforces while executing (type-level, then field-level; the keys
 * of one map are alternatives, as in scope-auth). The Idempotency-Key hook asks it before claiming or
 * replaying a key, so a stored answer is never handed to a caller the schema would refuse.
 *
 * Only maps of scopes (with $any/$all) can be decided ahead of execution: a root field declaring a function
 * or another kind of scope fails here, at boot, rather than being guessed at per request.
 */
export function createOperationAuthorizer(schema: GraphQLSchema) {
  for (const type of [schema.getQueryType(), schema.getMutationType()]) {
    if (!type) continue;
    assertDecidable(typeScopes(type), type.name);
    for (const [name, field] of Object.entries(type.getFields())) assertDecidable(fieldOptions(field.extensions).authScopes, `${type.name}.${name}`);
  }

  return function permits(principal: Principal, document: DocumentNode, operation: OperationDefinitionNode): boolean {
    const root = operation.operation === "mutation" ? schema.getMutationType() : operation.operation === "query" ? schema.getQueryType() : schema.getSubscriptionType();
    if (!root) return false;
    const scopes = scopesOf(principal);
    const fragments = new Map(
      document.definitions.filter((d): d is FragmentDefinitionNode => d.kind === Kind.FRAGMENT_DEFINITION).map((d) => [d.name.value, d]),
    );
    const typeLevel = typeScopes(root);
    return rootFieldNames(operation.selectionSet, fragments).every((name) => {
      if (name.startsWith("__")) return true;
      const field = root.getFields()[name];
      if (!field) return false; // validation refuses it anyway
      const options = fieldOptions(field.extensions);
      if (typeLevel && !options.skipTypeScopes && !satisfies(typeLevel, scopes, false)) return false;
      return !options.authScopes || satisfies(options.authScopes as ScopeMap, scopes, false);
    });
  };
}

export type OperationAuthorizer = ReturnType<typeof createOperationAuthorizer>;

function typeScopes(type: GraphQLObjectType): ScopeMap | undefined {
  return (type.extensions as { pothosOptions?: { authScopes?: ScopeMap } }).pothosOptions?.authScopes;
}

function fieldOptions(extensions: unknown): { authScopes?: unknown; skipTypeScopes?: boolean } {
  return (extensions as { pothosOptions?: { authScopes?: unknown; skipTypeScopes?: boolean } }).pothosOptions ?? {};
}

function assertDecidable(map: unknown, where: string): void {
  if (map === undefined) return;
  if (!map || typeof map !== "object") throw new Error(`${where}: authScopes must be a map of scopes to be decided before execution (idempotency replays)`);
  for (const [key, value] of Object.entries(map)) {
    if (key === "$any" || key === "$all") assertDecidable(value, where);
    else if (value !== true) throw new Error(`${where}: authScope ${key} must be true to be decided before execution`);
  }
}

function satisfies(map: ScopeMap, scopes: Scopes, all: boolean): boolean {
  const results = Object.entries(map).map(([key, value]) =>
    key === "$any" ? satisfies(value as ScopeMap, scopes, false) : key === "$all" ? satisfies(value as ScopeMap, scopes, true) : scopes[key as keyof Scopes] === true,
  );
  return all ? results.every(Boolean) : results.some(Boolean);
}

/** The root fields an operation selects, through fragments (each spread once). */
function rootFieldNames(selectionSet: SelectionSetNode, fragments: Map<string, FragmentDefinitionNode>, seen = new Set<string>()): string[] {
  return selectionSet.selections.flatMap((selection) => {
    if (selection.kind === Kind.FIELD) return [selection.name.value];
    if (selection.kind === Kind.INLINE_FRAGMENT) return rootFieldNames(selection.selectionSet, fragments, seen);
    const name = selection.name.value;
    const fragment = fragments.get(name);
    if (!fragment || seen.has(name)) return [];
    seen.add(name);
    return rootFieldNames(fragment.selectionSet, fragments, seen);
  });
}
