/**
 * bench/bare-server.ts on every core the gateway's WORKERS=2 gets: BARE_PROCESSES (2) processes sharing PORT
 * through node:cluster, as the gateway's workers do. The baseline of `bench/http.ts --workers`.
 *
 *   BARE_PROCESSES=2 DATABASE_URL=... MERCHANT_ID=1 CHANNEL_ID=1 PORT=4001 node --import tsx bench/bare-cluster.ts
 */
import cluster from "node:cluster";
import { fileURLToPath } from "node:url";

const processes = Number(process.env.BARE_PROCESSES ?? 2);
cluster.setupPrimary({ exec: fileURLToPath(new URL("./bare-server.ts", import.meta.url)) });
for (let i = 0; i < processes; i++) cluster.fork();
process.on("SIGTERM", () => {
  for (const worker of Object.values(cluster.workers ?? {})) worker?.process.kill("SIGTERM");
});
cluster.on("exit", () => {
  if (Object.keys(cluster.workers ?? {}).length === 0) process.exit(0);
});
