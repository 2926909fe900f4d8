import { ApiKeys } from '../keys/index.js';
import { option, print, withDatabase, type Command } from './command-line.js';

export const keysCommands: Record<string, Command> = {
  async 'keys create'(config, args) {
    const name = option(args, '--name');
    if (!name) {
      process.stderr.write('keys create needs --name NAME\n');
      return 2;
    }
    const { key, token } = await withDatabase(config, (db) => new ApiKeys(db).create(name));
    print({ id: key.id, name: key.name, api_key: token, note: 'store this key now: it is not shown again' });
    return 0;
  },

  async 'keys list'(config) {
    print(await withDatabase(config, (db) => new ApiKeys(db).list()));
    return 0;
  },

  async 'keys revoke'(config, args) {
    const id = args[0];
    if (!id) {
      process.stderr.write('keys revoke needs ID\n');
      return 2;
    }
    const revoked = await withDatabase(config, (db) => new ApiKeys(db).revoke(id));
    print(revoked ? `revoked ${id}` : `no active key ${id}`);
    return revoked ? 0 : 1;
  },
};
