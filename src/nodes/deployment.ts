import type { Db } from "../store/index.ts";

/** The id of the deployment this database belongs to, made once by migration `nodes/002_deployment_id`. */
export async function deploymentId(db: Db): Promise<string> {
  const [row] = await db.query<{ id: string }>("SELECT id FROM deployment");
  if (!row) throw new Error("the deployment table is empty: migration nodes/002_deployment_id did not run");
  return row.id;
}
