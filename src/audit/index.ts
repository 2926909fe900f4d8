export { AuditLog, type StoredRecord, type ChainProblem } from './audit-log.js';
export { Replayer, type ReplayReport } from './replay.js';
export { priceRecord, type PriceRecord } from './record.js';
export { canonicalJson, sha256 } from './canonical.js';
