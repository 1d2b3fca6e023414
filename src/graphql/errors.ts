import { ConflictError, GatewayError, NotFoundError, ValidationError, errorCatalogue, type ErrorCode } from "../errors.ts";
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

builder.objectType(ValidationError, {
  name: "ValidationError",
  interfaces: [ErrorInterface],
  isTypeOf: (value) => value instanceof ValidationError,
  fields: (t) => ({ field: t.string({ nullable: true, resolve: (e) => e.field ?? null }) }),
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
