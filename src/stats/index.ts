export { CountryTable, countries } from './countries.js';
export { deviceOf, type Device } from './devices.js';
export { listenerFacts, type ListenerFacts } from './listener-facts.js';
export { CSV_COLUMNS, statsCsv } from './stats-csv.js';
export { serviceStats, type ServiceStats } from './stats-document.js';
export { MAX_DAYS, statsRange } from './stats-range.js';
