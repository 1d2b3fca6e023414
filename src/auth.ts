import type { KeyMode } from "./security/api-keys.ts";

/** Who is calling: the merchant and mode of the API key. Every read and write is scoped by both. */
export interface Principal {
  merchantId: number;
  mode: KeyMode;
  keyId: number;
  keyPrefix: string;
}
