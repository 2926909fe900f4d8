export { ServiceRecords, type ServiceRow, type ServiceDocument, type StreamingEndpoint } from './service-records.js';
export { IcecastDecider } from './icecast-decider.js';
