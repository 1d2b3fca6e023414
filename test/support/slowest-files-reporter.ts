import { relative } from "node:path";
import type { Reporter, TestModule } from "vitest/node";

/**
 * Ends every run with the 15 slowest test files (per project) and their times, so a slow newcomer is seen
 * at once. The time is the file's wall-clock time in its worker: import, hooks and tests.
 */
export default class SlowestFilesReporter implements Reporter {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>) {
    if (testModules.length < 2) return;
    const rows = testModules
      .map((module) => {
        const d = module.diagnostic();
        return { ms: d.collectDuration + d.setupDuration + d.prepareDuration + d.duration, project: module.project.name, file: relative(process.cwd(), module.moduleId) };
      })
      .sort((a, b) => b.ms - a.ms)
      .slice(0, 15);
    const width = Math.max(...rows.map((r) => r.project.length));
    const lines = rows.map((r) => `${(r.ms / 1000).toFixed(1).padStart(7)} s  ${r.project.padEnd(width)}  ${r.file}`);
    process.stdout.write(`\nSlowest test files:\n${lines.join("\n")}\n`);
  }
}
