export interface FactRef {
  fact: string;
  path?: string;
}

export interface DerivedFactSpec {
  name: string;
  from: string;
  where?: { field: string; operator: string; param: string }[];
  order_by: string;
  pick: 'first' | 'last';
}

export interface RuleSpec {
  name: string;
  conditions: Record<string, unknown>;
  event: {
    type: 'price_line' | 'refund_line' | 'reject' | 'not_orderable' | 'transition' | 'enforce';
    params: Record<string, unknown>;
  };
}

export interface RuleDocument {
  description?: string;
  stage: 'product' | 'quote' | 'lifecycle' | 'buyer' | 'refund';
  derived_facts?: DerivedFactSpec[];
  rules: RuleSpec[];
}

export interface PriceLine {
  code: string;
  item?: string;
  quantity: string;
  unit: string;
  rate: string;
  rate_atomic: string;
  amount_atomic: string;
  amount: string;
  /** Refund lines only: a credit adds to the refund, a deduction takes from it. */
  direction?: 'credit' | 'deduct';
}

export interface Rejection {
  status: 409 | 422;
  code: string;
  message: string;
  pointer?: string;
}
export interface NotOrderableReason {
  code: string;
  reason: string;
}

export type ServiceAction = 'disconnect_source' | 'disconnect_listeners' | 'stop_autodj';
/** A life-cycle decision: move the service to another status, or act on it without changing its status. */
export interface ServiceDecision {
  kind: 'transition' | 'enforce';
  to?: string;
  code?: string;
  reason: string;
  actions: ServiceAction[];
}

export interface TraceEntry {
  rule: string;
  result: boolean;
  conditions: unknown;
  event?: unknown;
}

/** What a stage decided: everything an auditor needs to replay it. */
export interface StageOutcome {
  facts: Record<string, unknown>;
  trace: TraceEntry[];
  rejections: Rejection[];
  notOrderable: NotOrderableReason[];
  decisions: ServiceDecision[];
  lines: PriceLine[];
  total_atomic: string | null;
}
