/**
 * A data dir written before the escrow program held credits keeps each wallet's credits in a
 * token account of the service's own key. At start they move into the wallets' vaults, where this
 * version locks them; the ledger's balances do not change, only where the chain keeps them. Jobs
 * that were escrowed the old way cannot be finished by this version: the start is refused and
 * the message says how to finish them.
 */
import type { Chain } from "../chain/index.ts";
import type { Logger } from "../core/index.ts";
import * as ledger from "../ledger/index.ts";
import type { Db } from "../store/index.ts";

/** Refuses a data dir with jobs still open in the old custodial escrow. */
async function refuseOldOpenEscrows(chain: Chain, openJobIds: string[]): Promise<void> {
  const old: string[] = [];
  for (const jobId of openJobIds) if (await chain.hasCustodialEscrow(jobId)) old.push(jobId);
  if (old.length === 0) return;
  throw new Error(
    `this data dir has ${old.length} job(s) escrowed by an earlier version of svc, before the escrow program held credits ` +
      `(${old.slice(0, 3).join(", ")}${old.length > 3 ? ", ..." : ""}): start that version once on it to finish or refund them, then start this one`,
  );
}

/**
 * Moves every wallet's old custodial credits into its vault; returns how many wallets moved.
 * `openJobIds`: the jobs not yet ended (the jobs part's), refused when escrowed the old way.
 */
export async function moveCustodialCredits(db: Db, chain: Chain, logger: Logger, openJobIds: string[]): Promise<number> {
  await refuseOldOpenEscrows(chain, openJobIds);
  let moved = 0;
  for (const wallet of await ledger.walletAddresses(db)) {
    const prepared = await chain.prepareCustodialCreditsMove(wallet);
    if (!prepared) continue;
    await chain.send(prepared.wire);
    moved++;
  }
  if (moved > 0) logger.info({ wallets: moved }, "moved credits from the earlier custodial accounts into the wallets' vaults in the escrow program");
  return moved;
}
