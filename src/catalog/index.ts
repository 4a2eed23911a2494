/** The catalog part's public surface: the approved models as data, the wiring model among them. */
export { Catalog, defaultCatalog, LAUNCH_CATALOG, ratesOf, WIRING_MODEL, WIRING_MODEL_ID } from "./catalog.ts";
export type { CatalogModel } from "./catalog.ts";
