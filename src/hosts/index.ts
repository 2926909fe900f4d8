export {
  registerStreamingHost,
  beatStreamingHost,
  listStreamingHosts,
  type HostRegistration,
  type HostRecord,
} from './host-registry.js';
export { HostMonitor, type HostMonitorOptions, type MonitorPass } from './host-monitor.js';
export { moveService, type MoveOutcome } from './service-moves.js';
export {
  HostPlacement,
  PLACEMENT_LOCK_COLUMNS,
  type InFlightOrders,
  type PoolHost,
  type PlacementOptions,
} from './placement.js';
export { HostReconciler, HOST_SERVICES_CHANNEL, type HostWorkers } from './host-reconciler.js';
export { hostPoolReport, drainHost, undrainHost, removeHost, type HostReport, type HostChange } from './pool-report.js';
export { HostLease } from './host-lease.js';
