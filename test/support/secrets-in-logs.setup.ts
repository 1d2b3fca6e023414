import { afterAll, afterEach } from "vitest";
import { checkSecretsInLogs } from "./secrets-in-logs.ts";

// Every test file (vitest's setupFiles): a gateway process that printed a secret fails the test it ran in, or
// the file, when it printed it in a hook or while stopping (secrets-in-logs.ts).
afterEach(() => checkSecretsInLogs());
afterAll(() => checkSecretsInLogs());
