import './tracing';
import 'reflect-metadata';
import { runService } from '@mission/runtime';
import { hitServiceDefinition } from '@mission/service-hit';

runService(hitServiceDefinition);
