/** Something `audit verify` found wrong in the chain: the record's sequence number, its id, and what. */
export interface ChainProblem {
  seq: string;
  id?: string;
  problem: string;
  /** Not a broken chain: a paid order neither provisioned nor refunded within the bound (money in limbo). */
  undelivered?: true;
}
