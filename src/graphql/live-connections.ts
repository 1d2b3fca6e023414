import type { Principal } from "../auth.ts";

/**
 * Every long-lived connection (a graphql-ws socket, an SSE stream) by the principal it runs as, so a change to that
 * principal ends them at once: a user disabled, given another role or a new password, a key revoked. The changes
 * arrive from user-states.ts and key-cache.ts, published across instances, so every instance ends its own.
 */
export interface LiveConnection {
  /** Ends the connection: the principal lost (or changed) what let it in. */
  end(reason: string): void;
  /** Checks the principal again (after changes may have been missed) and ends the connection if it no longer holds. */
  recheck(): void;
}

export const principalKey = (principal: Pick<Principal, "userId" | "keyId">): string => (principal.userId !== null ? `user:${principal.userId}` : `key:${principal.keyId}`);

export class LiveConnections {
  readonly #byPrincipal = new Map<string, Set<LiveConnection>>();

  /** Registers a connection; the returned function removes it (call it when the connection closes). */
  add(principal: Pick<Principal, "userId" | "keyId">, connection: LiveConnection): () => void {
    const key = principalKey(principal);
    let set = this.#byPrincipal.get(key);
    if (!set) this.#byPrincipal.set(key, (set = new Set()));
    set.add(connection);
    return () => {
      set.delete(connection);
      if (set.size === 0 && this.#byPrincipal.get(key) === set) this.#byPrincipal.delete(key);
    };
  }

  /** Ends every connection of one user or key. */
  end(key: string, reason: string): void {
    for (const connection of [...(this.#byPrincipal.get(key) ?? [])]) connection.end(reason);
  }

  /** Every connection checks its principal again. */
  recheckAll(): void {
    for (const set of [...this.#byPrincipal.values()]) for (const connection of [...set]) connection.recheck();
  }

  get size(): number {
    let n = 0;
    for (const set of this.#byPrincipal.values()) n += set.size;
    return n;
  }
}
