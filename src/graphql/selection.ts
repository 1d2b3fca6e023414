import {
  isAbstractType,
  Kind,
  type FieldNode,
  type FragmentDefinitionNode,
  type GraphQLObjectType,
  type GraphQLResolveInfo,
  type SelectionSetNode,
} from "graphql";

/**
 * The names of the fields selected below the current field at `path` (["items"]: the page's items), through
 * inline fragments and fragment spreads. Null when a directive makes part of the selection conditional:
 * the caller then assumes everything is wanted. With `on`, the object type the selection is read for, fragments
 * on other types (`... on Error { code }` beside `... on Transaction { ... }` under a union) are left out.
 */
export function selectedFieldNames(info: GraphQLResolveInfo, path: readonly string[], on?: string): Set<string> | null {
  const target = on === undefined ? undefined : (info.schema.getType(on) as GraphQLObjectType | undefined);
  const applies = (typeCondition: string | undefined) => {
    if (!target || typeCondition === undefined) return true;
    const type = info.schema.getType(typeCondition);
    return type === target || (type !== undefined && isAbstractType(type) && info.schema.isSubType(type, target));
  };
  let sets = info.fieldNodes.flatMap((node) => (node.selectionSet ? [node.selectionSet] : []));
  for (const name of path) {
    const next: SelectionSetNode[] = [];
    for (const set of sets) {
      const fields = fieldsOf(set, info.fragments, () => true);
      if (!fields) return null;
      for (const field of fields) if (field.name.value === name && field.selectionSet) next.push(field.selectionSet);
    }
    sets = next;
  }
  const names = new Set<string>();
  for (const set of sets) {
    const fields = fieldsOf(set, info.fragments, applies);
    if (!fields) return null;
    for (const field of fields) names.add(field.name.value);
  }
  return names;
}

function fieldsOf(set: SelectionSetNode, fragments: Record<string, FragmentDefinitionNode>, applies: (typeCondition: string | undefined) => boolean): FieldNode[] | null {
  const fields: FieldNode[] = [];
  for (const selection of set.selections) {
    if (selection.directives?.length) return null;
    if (selection.kind === Kind.FIELD) {
      fields.push(selection);
      continue;
    }
    const fragment = selection.kind === Kind.INLINE_FRAGMENT ? selection : fragments[selection.name.value];
    if (!fragment) return null;
    if (!applies(fragment.typeCondition?.name.value)) continue;
    const nested = fieldsOf(fragment.selectionSet, fragments, applies);
    if (!nested) return null;
    fields.push(...nested);
  }
  return fields;
}
