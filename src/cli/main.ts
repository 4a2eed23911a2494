/**
 * The `svc` command. Each subcommand is loaded only when run: a worker has no use for the
 * gateway's database, chain and HTTP stack, and starts faster without them.
 */

const USAGE = `Usage: svc <command> [options]

Commands:
  dev       Start the gateway on embedded defaults, with a seed-pool worker and a funded dev wallet
  serve     Start a gateway for production: no worker or dev wallet of its own, options from flags or env
  worker    Serve models to a gateway from this machine (and 'worker stake' / 'worker unstake')
  verify    Check a job's charge on the chain: its escrow, the worker's proof, the split
  chain     'chain serve': the embedded chain on its own, over Solana's JSON-RPC;
            'chain init': deploy the escrow program and set up a Solana cluster for the service
  admin     Operate a deployment: suspend keys and workers, approve and retire models, read the audit log

Run 'svc <command> --help' for a command's options.`;

const [command, ...rest] = process.argv.slice(2);
switch (command) {
  case "dev":
    await (await import("./dev.ts")).runDev(rest);
    break;
  case "worker":
    await (await import("./worker.ts")).runWorker(rest);
    break;
  case "serve":
    await (await import("./serve.ts")).runServe(rest);
    break;
  case "chain":
    await (await import("./chain.ts")).runChain(rest);
    break;
  case "verify":
    await (await import("./verify.ts")).runVerify(rest);
    break;
  case "admin":
    await (await import("./admin.ts")).runAdmin(rest);
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
