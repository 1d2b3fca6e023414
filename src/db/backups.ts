import { execFile } from "node:child_process";
import type { PrismaClient } from "./database.ts";

/**
 * How recent the PostgreSQL backups are (deploy/pgbackrest/): the last good backup, from `pgbackrest info` (the
 * repository, wherever it is: this machine needs pgBackRest and its configuration), and the last WAL segment
 * archived, from PostgreSQL's own pg_stat_archiver (the primary knows what its archive_command shipped).
 * `npm run cli -- backup status` prints it; /metrics exports the ages (src/metrics/registry.ts).
 */
export interface BackupStatus {
  stanza: string;
  /** The newest backup pgBackRest lists (full, diff or incr; every listed backup completed), or null: none yet. */
  last_backup: { label: string; type: string; finished_at: string; age_seconds: number } | null;
  /** The last WAL segment archived, or null: none yet. */
  last_archived_wal: { segment: string; archived_at: string; age_seconds: number } | null;
  /** The last segment archive_command failed on, when that came after the last success (archiving is failing now). */
  archive_failing: { segment: string; failed_at: string } | null;
  /** pgBackRest's own word on the stanza ("ok"), or why it could not be read. */
  repository: string;
}

const PGBACKREST_TIMEOUT_MS = 30_000;

interface InfoBackup {
  label: string;
  type: string;
  timestamp: { start: number; stop: number };
}

interface StanzaInfo {
  name: string;
  status: { code: number; message: string };
  backup: InfoBackup[];
}

/** The newest completed backup of the stanza and pgBackRest's status message, read with `pgbackrest info --output=json`. */
export async function readBackups(stanza: string): Promise<{ last: InfoBackup | undefined; message: string }> {
  const output = await new Promise<string>((resolve, reject) => {
    execFile("pgbackrest", [`--stanza=${stanza}`, "--output=json", "info"], { timeout: PGBACKREST_TIMEOUT_MS, maxBuffer: 16 << 20 }, (error, stdout, stderr) => {
      if (error) reject(new Error(`pgbackrest info failed: ${(stderr || stdout || error.message).trim().split("\n").at(-1)}`));
      else resolve(stdout);
    });
  });
  const info = (JSON.parse(output) as StanzaInfo[]).find((s) => s.name === stanza);
  if (!info) return { last: undefined, message: `no stanza ${stanza} in the repository` };
  const last = [...info.backup].sort((a, b) => a.timestamp.stop - b.timestamp.stop).at(-1);
  return { last, message: info.status.message };
}

/** pg_stat_archiver on the primary: the last segment archived and the last that failed, with their times. */
export async function readArchiver(prisma: PrismaClient) {
  const [row] = await prisma.$queryRaw<{ last_archived_wal: string | null; last_archived_time: Date | null; last_failed_wal: string | null; last_failed_time: Date | null }[]>`
    SELECT last_archived_wal, last_archived_time, last_failed_wal, last_failed_time FROM pg_stat_archiver`;
  return row!;
}

const ageSeconds = (at: Date, now: Date) => Math.max(0, Math.round((now.getTime() - at.getTime()) / 1000));

export async function backupStatus(prisma: PrismaClient, stanza: string, now = new Date()): Promise<BackupStatus> {
  const [backups, archiver] = await Promise.all([readBackups(stanza).catch((error: Error) => ({ last: undefined, message: error.message })), readArchiver(prisma)]);
  const finished = backups.last && new Date(backups.last.timestamp.stop * 1000);
  const failing = archiver.last_failed_time && (!archiver.last_archived_time || archiver.last_failed_time > archiver.last_archived_time);
  return {
    stanza,
    last_backup: backups.last && finished ? { label: backups.last.label, type: backups.last.type, finished_at: finished.toISOString(), age_seconds: ageSeconds(finished, now) } : null,
    last_archived_wal:
      archiver.last_archived_wal && archiver.last_archived_time
        ? { segment: archiver.last_archived_wal, archived_at: archiver.last_archived_time.toISOString(), age_seconds: ageSeconds(archiver.last_archived_time, now) }
        : null,
    archive_failing: failing ? { segment: archiver.last_failed_wal ?? "", failed_at: archiver.last_failed_time!.toISOString() } : null,
    repository: backups.message,
  };
}
