/** The `svc` command. */
import { runDev } from "./dev.ts";

const USAGE = `Usage: svc <command> [options]

Commands:
  dev       Start the gateway on embedded defaults, with a seed-pool worker and a funded dev wallet

Run 'svc <command> --help' for a command's options.`;

const [command, ...rest] = process.argv.slice(2);
switch (command) {
  case "dev":
    await runDev(rest);
    break;
  case undefined:
  case "--help":
  case "-h":
  case "help":
    console.log(USAGE);
    break;
  default:
    console.error(`svc: unknown command '${command}'\n\n${USAGE}`);
    process.exit(2);
}
