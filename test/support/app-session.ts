/** A web-app session for a wallet, signed in the way the web app does it: its cookie, `svc_session=...`. */
export { signInAs as appSession } from "../web/sign-in.ts";
