// The eight coded-value registries (domain/registries/): the shared operation set each, nothing else.

import { registries } from '../../domain/registries/index.ts';
import type { Module } from '../module.ts';

export const registriesModule: Module = {
  name: 'registries',
  resources: registries.map((definition) => ({ definition })),
};
