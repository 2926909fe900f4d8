import { ARTIFACTS_PATH, compileContracts, writeArtifacts } from '../src/chain/contracts.js';

const artifacts = compileContracts();
writeArtifacts(artifacts);
console.log(`wrote ${ARTIFACTS_PATH} (solc ${artifacts.solcVersion}, sources ${artifacts.sourceHash.slice(0, 12)})`);
