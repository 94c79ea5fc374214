// The eight coded-value registries (domain/registries/): the shared operation set each, nothing
// else; access rules are written by admins only.

import { accessRule } from '../../domain/registries/accessRule.ts';
import { registries } from '../../domain/registries/index.ts';
import type { Module } from '../module.ts';

export const registriesModule: Module = {
  name: 'registries',
  // Access rules decide who reaches what: changing them is an admin's act (editors read them).
  resources: registries.map((definition) => (definition === accessRule ? { definition, routes: { permissions: { read: 'read', write: 'admin' } } } : { definition })),
};
