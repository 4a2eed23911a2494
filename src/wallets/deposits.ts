/**
 * Funding a wallet: its credits are minted on-chain (development funding, `svc dev` and the
 * tests), and credited in the ledger when the chain journal confirms the deposit. The jobs part
 * owns it because it owns the wallet's credits (money.ts); deposits a wallet signs itself are
 * wallet-payments.ts, and credited the same way (`creditDeposit`).
 */
import { recordTopup } from "../accounts/index.ts";
import type { ActionOwner, Chain, ChainAction, ChainJournal } from "../chain/index.ts";
import { emitCreditTopup } from "../events/index.ts";
import type { Db } from "../store/index.ts";
import { checkCreditLow } from "./balance.ts";
import { deposit } from "./funding.ts";

async function prepareDeposit(chain: Chain, wallet: string, credits: number): Promise<ChainAction> {
  const prepared = await chain.prepareDeposit({ wallet, credits });
  return { kind: "deposit", subject: wallet, signature: prepared.signature, wire: prepared.wire, params: { credits } };
}

/**
 * A confirmed deposit, however it was paid (minted for development, or signed by the wallet):
 * the ledger credits it, the top-up is recorded and `credit.topup` fires. Returns the wallet's
 * credits available after it.
 */
export async function creditDeposit(tx: Db, action: ChainAction): Promise<number> {
  const credits = action.params?.credits ?? 0;
  const remaining = await deposit(tx, action.subject, credits, action.signature);
  await recordTopup(tx, action.subject, new Date());
  await emitCreditTopup(tx, { wallet: action.subject, creditsAdded: credits, creditsRemaining: remaining, depositTx: action.signature });
  await checkCreditLow(tx, action.subject, remaining, false);
  return remaining;
}

function depositOwner(chain: Chain): ActionOwner {
  return {
    async confirmed(tx, action) {
      await creditDeposit(tx, action);
    },
    rejected: async () => undefined,
    // The service signs development funding itself, so an expired one is minted afresh (a
    // wallet's own deposit cannot be: wallet-payments.ts gives it up and the app asks again).
    rebuild: (action) => prepareDeposit(chain, action.subject, action.params?.credits ?? 0),
    dropped: async () => undefined,
  };
}

export class Deposits {
  constructor(
    private readonly db: Db,
    private readonly journal: ChainJournal,
    private readonly chain: Chain,
  ) {
    journal.register("deposit", depositOwner(chain));
  }

  /** Fund a wallet: its credits are minted on-chain, and credited in the ledger once confirmed. Returns the signature. */
  async deposit(wallet: string, credits: number): Promise<string> {
    const action = await prepareDeposit(this.chain, wallet, credits);
    await this.journal.record(this.db, action);
    await this.journal.send(action);
    return action.signature;
  }

  async hasDeposit(wallet: string): Promise<boolean> {
    return this.journal.hasAction("deposit", wallet);
  }
}
