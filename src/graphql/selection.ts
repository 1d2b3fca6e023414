import { Kind, type FieldNode, type FragmentDefinitionNode, type GraphQLResolveInfo, type SelectionSetNode } from "graphql";

/**
 * The names of the fields selected below the current field at `path` (["items"]: the page's items), through
 * inline fragments and fragment spreads. Null when a directive makes part of the selection conditional:
 * the caller then assumes everything is wanted.
 */
export function selectedFieldNames(info: GraphQLResolveInfo, path: readonly string[]): Set<string> | null {
  let sets = info.fieldNodes.flatMap((node) => (node.selectionSet ? [node.selectionSet] : []));
  for (const name of path) {
    const next: SelectionSetNode[] = [];
    for (const set of sets) {
      const fields = fieldsOf(set, info.fragments);
      if (!fields) return null;
      for (const field of fields) if (field.name.value === name && field.selectionSet) next.push(field.selectionSet);
    }
    sets = next;
  }
  const names = new Set<string>();
  for (const set of sets) {
    const fields = fieldsOf(set, info.fragments);
    if (!fields) return null;
    for (const field of fields) names.add(field.name.value);
  }
  return names;
}

function fieldsOf(set: SelectionSetNode, fragments: Record<string, FragmentDefinitionNode>): FieldNode[] | null {
  const fields: FieldNode[] = [];
  for (const selection of set.selections) {
    if (selection.directives?.length) return null;
    if (selection.kind === Kind.FIELD) {
      fields.push(selection);
      continue;
    }
    const inner = selection.kind === Kind.INLINE_FRAGMENT ? selection.selectionSet : fragments[selection.name.value]?.selectionSet;
    const nested = inner ? fieldsOf(inner, fragments) : null;
    if (!nested) return null;
    fields.push(...nested);
  }
  return fields;
}
