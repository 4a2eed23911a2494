/** The parts of the families' tokenizer packages the token-count thread uses; they ship no types. */
declare module "llama3-tokenizer-js" {
  const tokenizer: { encode(text: string, options?: { bos?: boolean; eos?: boolean }): number[] };
  export default tokenizer;
}

declare module "mistral-tokenizer-js" {
  const tokenizer: { encode(text: string, addBosToken?: boolean, addPrecedingSpace?: boolean): number[] };
  export default tokenizer;
}
