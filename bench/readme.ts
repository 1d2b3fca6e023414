import { readFileSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

/** Replaces (or appends) one benchmark's section of bench/README.md: from its heading to the next "## ". */
export function writeReadmeSection(heading: string, body: string): void {
  const readme = fileURLToPath(new URL("./README.md", import.meta.url));
  const text = readFileSync(readme, "utf8");
  const from = text.indexOf(heading);
  const next = from < 0 ? -1 : text.indexOf("\n## ", from + heading.length);
  const before = from < 0 ? `${text.trimEnd()}\n\n` : text.slice(0, from);
  const after = next < 0 ? "" : `\n${text.slice(next + 1)}`;
  writeFileSync(readme, `${before}${heading}\n\n${body.trimEnd()}\n${after}`);
}
