import './tracing';
import 'reflect-metadata';
import { runService } from '@mission/runtime';
import { brainServiceDefinition } from '@mission/service-brain';

runService(brainServiceDefinition);
