/**
 * What a worker's word weighs when workers' outputs disagree. A key costs nothing to make, so a
 * worker's vote counts only as much as it can lose: a worker staked in the escrow program weighs
 * its active stake (slashed, or below the minimum, it weighs nothing); a worker of the operator's
 * seed pool, trusted while the network is young, outweighs any stake. Every other worker weighs
 * nothing: it can serve, but it never decides against anyone.
 */

/** Above any stake a u64 of base units can hold, so one seed worker outweighs every staked one. */
export const SEED_WEIGHT = 10n ** 30n;

export class WorkerTrust {
  private readonly seedPool: Set<string>;

  constructor(
    /** Addresses of the operator's seed pool. */
    seedPool: Iterable<string>,
    /** A worker's stake while it counts as staked, else 0 (Chain.stakeBehindWord). */
    private readonly stakeBehindWord: (address: string) => Promise<bigint>,
  ) {
    this.seedPool = new Set(seedPool);
  }

  /** A worker trusted by the operator. */
  inSeedPool(address: string): boolean {
    return this.seedPool.has(address);
  }

  /** The operator adds a worker of its own to the seed pool. */
  vouch(address: string): void {
    this.seedPool.add(address);
  }

  /** The worker's weight; a stake that cannot be read weighs nothing, so a chain outage never lends trust. */
  async weight(address: string): Promise<bigint> {
    if (this.seedPool.has(address)) return SEED_WEIGHT;
    return await this.stakeBehindWord(address).catch(() => 0n);
  }
}

/** One re-executor's output hash and its weight. */
export interface Vote {
  hash: string;
  weight: bigint;
}

/**
 * The output hash the votes settle on, if any: the hash whose voters together weigh more than
 * the accused worker and more than every other hash's voters together. Weightless votes never
 * settle anything, so any number of fresh keys outvote nobody.
 */
export function weightedVerdict(accusedWeight: bigint, votes: readonly Vote[]): string | undefined {
  const byHash = new Map<string, bigint>();
  let total = 0n;
  for (const { hash, weight } of votes) {
    byHash.set(hash, (byHash.get(hash) ?? 0n) + weight);
    total += weight;
  }
  for (const [hash, weight] of byHash) if (weight > 0n && weight > accusedWeight && weight > total - weight) return hash;
  return undefined;
}
