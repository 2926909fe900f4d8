export {
  registerStreamingHost,
  beatStreamingHost,
  listStreamingHosts,
  type HostRegistration,
  type HostRecord,
} from './host-registry.js';
export { HostPlacement, type PoolHost, type PlacementOptions } from './placement.js';
export { HostReconciler, HOST_SERVICES_CHANNEL, type HostWorkers } from './host-reconciler.js';
export { hostPoolReport, drainHost, undrainHost, removeHost, type HostReport, type HostChange } from './pool-report.js';
