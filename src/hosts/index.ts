export {
  registerStreamingHost,
  beatStreamingHost,
  listStreamingHosts,
  type HostRegistration,
  type HostRecord,
} from './host-registry.js';
export { HostMonitor, type HostMonitorOptions, type MonitorPass } from './host-monitor.js';
export { moveService, HOST_SERVICES_CHANNEL, type MoveOutcome } from './service-moves.js';
export { dropServicesMovedAway } from './host-fence.js';
