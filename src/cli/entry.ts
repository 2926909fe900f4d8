import { helpRequest } from './help.js';

// --help answers at once, without loading the commands (and all the service's modules behind them).
const help = helpRequest(process.argv.slice(2));
if (help !== undefined) process.stdout.write(`${help}\n`);
else await import('./main.js');
