import { createInterface } from "node:readline/promises";
import { countryOf, currencyOf, defaultCurrency, defaultTimezone, timezoneOf } from "../modules/merchants/profile.ts";
import { GatewayError } from "../errors.ts";
import { readPassword } from "./password.ts";
import { UsageError } from "./usage.ts";

type Options = Record<string, string | boolean | undefined>;

/**
 * `setup`'s answers, gathered by the CLI before it opens the database (or hands the command to a gateway): from
 * the flags, and at a terminal whatever they leave out, each checked as it is typed; the password always hidden
 * (twice) or from stdin with --password-stdin. Without a terminal every required flag must be given.
 */
export async function readSetupAnswers(values: Options): Promise<{ options: Options; password: string }> {
  const fromStdin = values["password-stdin"] === true;
  const interactive = !fromStdin && process.stdin.isTTY === true;
  const options: Options = { ...values };
  if (!interactive) {
    for (const name of ["name", "email"]) {
      if (typeof values[name] !== "string" || values[name].trim() === "") {
        throw new UsageError(`--${name} is required (without a terminal to ask at, setup takes --name, --email, [--country, --timezone, --currency] and the password on stdin with --password-stdin)`);
      }
    }
    return { options, password: await readPassword(fromStdin) };
  }
  // The prompts go to stderr: stdout carries the command's JSON answer.
  const rl = createInterface({ input: process.stdin, output: process.stderr });
  const ask = async (name: string, question: string, check: (answer: string) => string, fallback?: string): Promise<void> => {
    if (typeof options[name] === "string") return;
    for (;;) {
      const answer = (await rl.question(fallback ? `${question} [${fallback}]: ` : `${question}: `)).trim() || fallback || "";
      try {
        options[name] = check(answer);
        return;
      } catch (error) {
        process.stderr.write(`  ${error instanceof GatewayError || error instanceof UsageError ? error.message : String(error)}\n`);
      }
    }
  };
  const required = (field: string) => (answer: string) => {
    if (answer === "") throw new UsageError(`${field} is required`);
    return answer;
  };
  try {
    process.stderr.write("Set up a merchant and its first owner (who signs in to the dashboard with this e-mail).\n");
    await ask("name", "Business name", required("The business name"));
    await ask("email", "Owner's e-mail", required("The e-mail"));
    await ask("country", "Country (two letters, e.g. KE)", (answer) => (answer === "" ? "" : countryOf(answer)), "KE");
    const country = typeof options.country === "string" && options.country !== "" ? countryOf(options.country) : null;
    await ask("timezone", "Time zone", timezoneOf, defaultTimezone(country));
    await ask("currency", "Default currency", currencyOf, defaultCurrency(country));
  } finally {
    rl.close();
  }
  return { options, password: await readPassword(false) };
}
