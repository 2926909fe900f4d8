import { HostMonitor } from '../../hosts/index.js';
import { inFlightByHost, OrderStore } from '../../orders/index.js';
import type { Foundation } from './foundation.js';

/**
 * Every instance watches the pool (one pass at a time across instances): hosts that miss their heartbeat are marked
 * down and their services moved to hosts with room (beside the paid orders placed there and not provisioned yet).
 */
export function watchHostPool({ config, log, db, live, metrics, shutdown }: Foundation): void {
  const monitor = new HostMonitor(db, log, {
    downAfterSeconds: config.streaming.downAfterSeconds,
    intervalMs: config.streaming.heartbeatMs,
    inFlight: inFlightByHost(new OrderStore(db), live),
    onPass: (pass) => {
      metrics.hostsMarkedDown.inc(pass.markedDown.length);
      metrics.serviceMoves.inc(pass.moved.length);
    },
  });
  monitor.start();
  shutdown.push(() => monitor.stop());
}
