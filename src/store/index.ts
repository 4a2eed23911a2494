export { isEmbedded, sqlState, violatedConstraint } from "./db.ts";
export { openDb } from "./open.ts";
export type { Db, DbKind, OpenDbOptions } from "./db.ts";
export { migrate, MigrationChangedError } from "./migrate.ts";
export type { Migration } from "./migrate.ts";
export { addValues, CombinedStatement, unpadded, valuesList } from "./sql.ts";
export { isTransaction } from "./tx.ts";
export { GroupCommit } from "./group-commit.ts";
export type { GroupCommitOptions, GroupWork } from "./group-commit.ts";
