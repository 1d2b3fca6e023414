import { UsageError } from "./usage.ts";

/**
 * A password for `user create`: all of stdin with --password-stdin (for scripts; one trailing newline
 * dropped), or typed at a terminal prompt without echo. Never from an argument, which other users of
 * the machine can read in the process list and which lands in shell history.
 */
export async function readPassword(fromStdin: boolean): Promise<string> {
  if (fromStdin) {
    const chunks: Buffer[] = [];
    for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
    return Buffer.concat(chunks).toString("utf8").replace(/\r?\n$/, "");
  }
  if (!process.stdin.isTTY) throw new UsageError("No terminal to ask for the password: pipe it in with --password-stdin");
  const first = await prompt("Password: ");
  const second = await prompt("Repeat password: ");
  if (first !== second) throw new UsageError("The passwords do not match");
  return first;
}

function prompt(question: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const stdin = process.stdin;
    process.stderr.write(question);
    stdin.setRawMode(true);
    stdin.resume();
    let typed = "";
    const done = (error?: Error) => {
      stdin.setRawMode(false);
      stdin.pause();
      stdin.off("data", onData);
      process.stderr.write("\n");
      if (error) reject(error);
      else resolve(typed);
    };
    const onData = (data: Buffer) => {
      for (const char of data.toString("utf8")) {
        if (char === "\r" || char === "\n") return done();
        if (char === "\u0003") return done(new UsageError("Cancelled"));
        if (char === "\u007f" || char === "\b") typed = typed.slice(0, -1);
        else typed += char;
      }
    };
    stdin.on("data", onData);
  });
}
