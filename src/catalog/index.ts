/**
 * The catalog part's public surface: the approved models, governed in the database and held in
 * memory by every node, the wiring model among them as a local entry.
 */
export { Catalog, defaultCatalog, LAUNCH_CATALOG, modelNotFound, ratesOf, WIRING_MODEL, WIRING_MODEL_ID } from "./catalog.ts";
export type { CatalogModel, GovernedModel, Retirement } from "./catalog.ts";
export { approveModel, listGovernedModels, loadGovernedCatalog, retireModel, seedLaunchCatalog } from "./governance.ts";
export type { ModelApproval } from "./governance.ts";
export { CATALOG_MIGRATIONS } from "./schema.ts";
