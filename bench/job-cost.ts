/**
 * What one job costs on the chain, read from the chain itself: for N jobs that lock, settle with a
 * real worker proof, and N that lock and refund, the transactions sent, the signatures their fees
 * were charged for, the fees, and everything else the service's paying keys spent (rent that did
 * not come back): the fee payer's and the service authority's lamports together, since which of
 * the two pays a job's transactions depends on the commit measured. Works on any commit whose
 * Chain has lockEscrow/settle/refund, so the same script measures before and after a change to
 * the money path.
 *
 * Run: node --import tsx bench/job-cost.ts [jobs=50]
 */
import { openChain, type Chain } from "../src/chain/index.ts";
import { generateKeypair } from "../src/core/keys.ts";
import { newId } from "../src/core/ids.ts";
import { outputHash, proofMessage } from "../src/core/proof.ts";

const JOBS = Number(process.argv[2] ?? 50);
const LAMPORTS_PER_SIGNATURE = 5_000n;

interface Cost {
  transactions: number;
  signatures: bigint;
  feeLamports: bigint;
  payerSpentLamports: bigint;
}

async function payerLamports(chain: Chain): Promise<bigint> {
  const [feePayer, authority] = await Promise.all([chain.feePayer, chain.serviceAuthority].map((a) => chain.backend.getAccount(a)));
  return (feePayer?.lamports ?? 0n) + (authority?.lamports ?? 0n);
}

async function measure(chain: Chain, run: (signatures: string[]) => Promise<void>): Promise<Cost> {
  const before = await payerLamports(chain);
  const signatures: string[] = [];
  await run(signatures);
  let feeLamports = 0n;
  for (const s of signatures) feeLamports += BigInt((await chain.backend.getTransaction(s))?.meta?.fee ?? 0);
  return { transactions: signatures.length, signatures: feeLamports / LAMPORTS_PER_SIGNATURE, feeLamports, payerSpentLamports: before - (await payerLamports(chain)) };
}

function report(name: string, cost: Cost): void {
  const per = (v: bigint | number) => (Number(v) / JOBS).toFixed(2);
  console.log(
    `${name.padEnd(22)} per job: ${per(cost.transactions)} transactions, ${per(cost.signatures)} signatures, ` +
      `${per(cost.feeLamports)} lamports in fees, ${per(cost.payerSpentLamports - cost.feeLamports)} lamports of rent kept`,
  );
}

const chain = await openChain({});
try {
  const wallet = generateKeypair().address;
  const worker = generateKeypair();
  await chain.deposit({ wallet, credits: 10 * JOBS });
  const settled = await measure(chain, async (signatures) => {
    for (let i = 0; i < JOBS; i++) {
      const jobId = newId("job");
      signatures.push((await chain.lockEscrow({ jobId, tier: "lite", wallet, credits: 3 })).signature);
      const proofHash = outputHash(`output ${i}`);
      const input = { jobId, wallet, creditsLocked: 3, creditsCharged: 2, workerPublicKey: worker.address, staked: false, proofHash, proofSignature: worker.sign(proofMessage(jobId, proofHash)) };
      signatures.push((await chain.settle(input)).signature);
    }
  });
  const refunded = await measure(chain, async (signatures) => {
    for (let i = 0; i < JOBS; i++) {
      const jobId = newId("job");
      signatures.push((await chain.lockEscrow({ jobId, tier: "lite", wallet, credits: 3 })).signature);
      signatures.push((await chain.refund({ jobId, wallet, creditsLocked: 3 })).signature);
    }
  });
  report("lock + settle", settled);
  report("lock + refund", refunded);
} finally {
  await chain.close();
}
