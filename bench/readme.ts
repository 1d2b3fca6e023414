import { readFileSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

const README = fileURLToPath(new URL("./README.md", import.meta.url));
const MARKED = /<!-- ([\w-]+):start -->[\s\S]*?<!-- \1:end -->/g;

/** The README cut around one section: what comes before its heading, the section, and what follows it. */
function sectionOf(heading: string) {
  const text = readFileSync(README, "utf8");
  const from = text.indexOf(heading);
  const next = from < 0 ? -1 : text.indexOf("\n## ", from + heading.length);
  return {
    before: from < 0 ? `${text.trimEnd()}\n\n` : text.slice(0, from),
    section: from < 0 ? "" : text.slice(from, next < 0 ? undefined : next + 1),
    after: next < 0 ? "" : `\n${text.slice(next + 1)}`,
  };
}

/** Replaces (or appends) one benchmark's whole section of bench/README.md: from its heading to the next "## ". */
export function replaceReadmeSection(heading: string, body: string): void {
  const { before, after } = sectionOf(heading);
  writeFileSync(README, `${before}${heading}\n\n${body.trimEnd()}\n${after}`);
}

/**
 * Writes one benchmark's results into its section of bench/README.md. When the section already holds every marked
 * block of `body` (`<!-- name:start -->` ... `<!-- name:end -->`), only those blocks are replaced, so the readings
 * written by hand around them stay; otherwise the whole section is (replaceReadmeSection).
 */
export function writeReadmeSection(heading: string, body: string): void {
  const { before, section, after } = sectionOf(heading);
  const blocks = new Map([...body.matchAll(MARKED)].map((m) => [m[1]!, m[0]]));
  const allThere = blocks.size > 0 && [...blocks.keys()].every((name) => section.includes(`<!-- ${name}:start -->`));
  if (!allThere) return replaceReadmeSection(heading, body);
  writeFileSync(README, `${before}${section.replace(MARKED, (block, name: string) => blocks.get(name) ?? block).trimEnd()}\n${after}`);
}
