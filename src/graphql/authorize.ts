import { Kind, type DocumentNode, type FragmentDefinitionNode, type GraphQLSchema, type OperationDefinitionNode, type SelectionSetNode } from "graphql";
import type { Principal } from "../auth.ts";
import { allows, permissionOf } from "../authorization.ts";

/**
 * Decides before execution whether a caller may run every root field an operation selects, from the same
 * authorization table the schema's auth scopes come from (src/authorization.ts). The Idempotency-Key hook asks
 * it before claiming or replaying a key, so a stored answer is never handed to a caller the schema would refuse.
 */
export function createOperationAuthorizer(schema: GraphQLSchema) {
  return function permits(principal: Principal, document: DocumentNode, operation: OperationDefinitionNode): boolean {
    const root = operation.operation === "mutation" ? schema.getMutationType() : operation.operation === "query" ? schema.getQueryType() : schema.getSubscriptionType();
    if (!root) return false;
    const fragments = new Map(
      document.definitions.filter((d): d is FragmentDefinitionNode => d.kind === Kind.FRAGMENT_DEFINITION).map((d) => [d.name.value, d]),
    );
    return rootFieldNames(operation.selectionSet, fragments).every((name) => {
      if (name.startsWith("__")) return true;
      const permission = permissionOf(root.name, name);
      return permission !== undefined && allows(principal, permission);
    });
  };
}

export type OperationAuthorizer = ReturnType<typeof createOperationAuthorizer>;

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
