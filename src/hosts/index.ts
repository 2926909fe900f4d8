export {
  registerStreamingHost,
  beatStreamingHost,
  listStreamingHosts,
  type HostRegistration,
  type HostRecord,
} from './host-registry.js';
