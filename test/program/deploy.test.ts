/**
 * The committed program deploys the way a cluster deploys programs: through the upgradeable BPF
 * loader's own instructions (buffer, chunked writes, deploy), not LiteSVM's shortcut, and then runs;
 * only its upgrade authority may then send the `initialize` that fixes its configuration.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { AccountRole, createNoopSigner, type Address, type Instruction } from "@solana/kit";
import { getCreateAccountInstruction } from "@solana-program/system";
import { SYSTEM_PROGRAM, addressBytes } from "../../src/chain/addresses.ts";
import {
  DEFAULT_RULES,
  configAddress,
  decodeConfig,
  deriveAddress,
  escrowInstructions as ix,
  UPGRADEABLE_LOADER as LOADER,
} from "../../src/chain/escrow-program/index.ts";
import { generateKeypair } from "../../src/core/keys.ts";
import { EscrowChain, PROGRAM_PATH, customError } from "./harness.ts";

const RENT_SYSVAR = "SysvarRent111111111111111111111111111111111" as Address;
const CLOCK_SYSVAR = "SysvarC1ock11111111111111111111111111111111" as Address;
const BUFFER_HEADER = 37; // UpgradeableLoaderState::Buffer: tag u32, Option<authority>
const PROGRAM_SIZE = 36; // UpgradeableLoaderState::Program: tag u32, programdata address
const CHUNK = 900;

/** Loader instructions are bincode enums: a u32 tag, then the fields. */
function loaderData(tag: number, ...fields: Uint8Array[]): Uint8Array {
  const head = new Uint8Array(4);
  new DataView(head.buffer).setUint32(0, tag, true);
  return Buffer.concat([head, ...fields]);
}
const u32 = (v: number) => { const b = Buffer.alloc(4); b.writeUInt32LE(v); return b; };
const u64 = (v: bigint) => { const b = Buffer.alloc(8); b.writeBigUInt64LE(v); return b; };
const loaderIx = (accounts: [Address, AccountRole][], data: Uint8Array): Instruction => ({
  programAddress: LOADER, accounts: accounts.map(([address, role]) => ({ address, role })), data,
});

test("escrow.so deploys through the upgradeable loader, runs, and only its upgrade authority initializes it", async () => {
  const chain = await EscrowChain.open();
  const elf = readFileSync(PROGRAM_PATH);
  const buffer = generateKeypair();
  const program = generateKeypair();
  const authority = generateKeypair();
  const { WRITABLE, READONLY, READONLY_SIGNER, WRITABLE_SIGNER } = AccountRole;
  const rent = (size: number) => chain.svm.minimumBalanceForRentExemption(BigInt(size));
  const create = (account: typeof buffer, space: number) => getCreateAccountInstruction({
    payer: createNoopSigner(chain.payer.address), newAccount: createNoopSigner(account.address),
    lamports: rent(space), space, programAddress: LOADER,
  });

  chain.expectOk(chain.send([
    create(buffer, BUFFER_HEADER + elf.length),
    loaderIx([[buffer.address, WRITABLE], [authority.address, READONLY]], loaderData(0)),
  ], [buffer]));
  for (let at = 0; at < elf.length; at += CHUNK) {
    const bytes = elf.subarray(at, at + CHUNK);
    chain.expectOk(chain.send([loaderIx([[buffer.address, WRITABLE], [authority.address, READONLY_SIGNER]],
      loaderData(1, u32(at), u64(BigInt(bytes.length)), bytes))], [authority]));
  }
  const programData = deriveAddress([addressBytes(program.address)], LOADER).address;
  chain.expectOk(chain.send([
    create(program, PROGRAM_SIZE),
    loaderIx([
      [chain.payer.address, WRITABLE_SIGNER], [programData, WRITABLE], [program.address, WRITABLE], [buffer.address, WRITABLE],
      [RENT_SYSVAR, READONLY], [CLOCK_SYSVAR, READONLY], [SYSTEM_PROGRAM, READONLY], [authority.address, READONLY_SIGNER],
    ], loaderData(2, u64(BigInt(elf.length) * 2n))),
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
