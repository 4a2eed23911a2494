/**
 * The committed program deploys the way a cluster deploys programs: through the upgradeable BPF
 * loader's own instructions (buffer, chunked writes, deploy), not LiteSVM's shortcut, and then runs;
 * only its upgrade authority may then send the `initialize` that fixes its configuration.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { createNoopSigner, type Address } from "@solana/kit";
import { getCreateAccountInstruction } from "@solana-program/system";
import { addressBytes } from "../../src/chain/addresses.ts";
import {
  DEFAULT_RULES,
  configAddress,
  decodeConfig,
  escrowInstructions as ix,
  UPGRADEABLE_LOADER as LOADER,
} from "../../src/chain/escrow-program/index.ts";
import * as loader from "../../src/chain/loader-v3.ts";
import { generateKeypair } from "../../src/core/keys.ts";
import { EscrowChain, PROGRAM_PATH, customError } from "./harness.ts";

const CHUNK = 900;

test("escrow.so deploys through the upgradeable loader, runs, and only its upgrade authority initializes it", async () => {
  const chain = await EscrowChain.open();
  const elf = readFileSync(PROGRAM_PATH);
  const buffer = generateKeypair();
  const program = generateKeypair();
  const authority = generateKeypair();
  const rent = (size: number) => chain.svm.minimumBalanceForRentExemption(BigInt(size));
  const create = (account: typeof buffer, space: number) => getCreateAccountInstruction({
    payer: createNoopSigner(chain.payer.address), newAccount: createNoopSigner(account.address),
    lamports: rent(space), space, programAddress: LOADER,
  });

  chain.expectOk(chain.send([
    create(buffer, loader.BUFFER_METADATA_SIZE + elf.length),
    loader.initializeBuffer({ buffer: buffer.address, authority: authority.address }),
  ], [buffer]));
  for (let at = 0; at < elf.length; at += CHUNK) {
    const bytes = elf.subarray(at, at + CHUNK);
    chain.expectOk(chain.send([loader.write({ buffer: buffer.address, authority: authority.address, offset: at, bytes })], [authority]));
  }
  chain.expectOk(chain.send([
    create(program, loader.PROGRAM_ACCOUNT_SIZE),
    loader.deployWithMaxDataLen({ payer: chain.payer.address, program: program.address, buffer: buffer.address, authority: authority.address, maxDataLen: elf.length * 2 }),
  ], [program, authority]));
  chain.svm.warpToSlot(chain.svm.getClock().slot + 1n); // a program deployed in one slot runs from the next

  const sent = chain.send([{ programAddress: program.address, accounts: [], data: Uint8Array.of(200) }]);
  assert.equal(sent.err, customError("invalidInstruction"), "the deployed program ran and refused unknown data");
  const account = chain.svm.getAccount(addressBytes(program.address))!;
  assert.equal(account.executable(), true);

  const init = (upgradeAuthority?: Address) => ix.initialize({
    serviceAuthority: chain.authority.address, payer: chain.payer.address, treasury: chain.treasury,
    usdcMint: chain.usdcMint.address, stakeMint: chain.stakeMint.address, rules: DEFAULT_RULES,
    program: program.address, upgradeAuthority,
  });
  const racer = generateKeypair();
  assert.equal(chain.send([init(racer.address)], [chain.authority, racer]).err, customError("missingSigner"), "not the upgrade authority");
  assert.equal(chain.send([init()], [chain.authority]).err, customError("missingSigner"), "no upgrade authority signing");
  chain.expectOk(chain.send([init(authority.address)], [chain.authority, authority]));
  assert.equal(decodeConfig(chain.data(configAddress(program.address).address)!).serviceAuthority, chain.authority.address);
});
