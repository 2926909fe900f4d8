export { upgradeStillFits } from './upgrade-sale.js';
export { extensionStillFits } from './extension-sale.js';
