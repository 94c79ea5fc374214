// The eight coded-value registries (./domain/): the shared operation set each, nothing
// else; access rules are written by admins only.

import { accessRule } from '../../domain/access/accessRule.ts';
import { registries } from './domain/index.ts';
import type { Module } from '../../api/module.ts';

export const registriesModule: Module = {
  name: 'registries',
  // Access rules decide who reaches what: changing them is an admin's act (editors read them).
  resources: registries.map((definition) =>
    definition === accessRule ? { definition, routes: { permissions: { read: 'read', write: 'admin' } } } : { definition },
  ),
};
