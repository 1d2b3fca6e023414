import SchemaBuilder, { BasePlugin, type PothosOutputFieldConfig, type SchemaTypes } from "@pothos/core";
import { permissionOf } from "../authorization.ts";

/**
 * Gives every root field (Query, Mutation, Subscription) the auth scope the authorization table
 * (src/authorization.ts) names for it, replacing whatever a module declared: the table is the one place
 * that decides. A root field the table does not name fails the schema's build, so nothing is ever exposed
 * without a row. Runs before scope-auth wraps the resolvers (it is listed first).
 */
export class AuthorizationTablePlugin<Types extends SchemaTypes> extends BasePlugin<Types> {
  override onOutputFieldConfig(fieldConfig: PothosOutputFieldConfig<Types>): PothosOutputFieldConfig<Types> {
    const root = fieldConfig.kind;
    if (root !== "Query" && root !== "Mutation" && root !== "Subscription") {
      // A restricted field below the root (RESTRICTED_FIELDS) gets its scope on top of its object's.
      const permission = permissionOf(fieldConfig.parentType, fieldConfig.name);
      return permission ? ({ ...fieldConfig, pothosOptions: { ...fieldConfig.pothosOptions, authScopes: { [permission]: true } } } as PothosOutputFieldConfig<Types>) : fieldConfig;
    }
    const permission = permissionOf(root, fieldConfig.name);
    if (!permission) throw new Error(`${root}.${fieldConfig.name} has no row in the authorization table (src/authorization.ts)`);
    return { ...fieldConfig, pothosOptions: { ...fieldConfig.pothosOptions, authScopes: { [permission]: true }, skipTypeScopes: true } } as PothosOutputFieldConfig<Types>;
  }
}

const pluginName = "authorizationTable";
export default pluginName;

declare global {
  export namespace PothosSchemaTypes {
    export interface Plugins<Types extends SchemaTypes> {
      authorizationTable: AuthorizationTablePlugin<Types>;
    }
  }
}

SchemaBuilder.registerPlugin(pluginName, AuthorizationTablePlugin);
